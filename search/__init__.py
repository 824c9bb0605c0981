"""clew.search"""
