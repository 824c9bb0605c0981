"""clew.scripts"""
