"""clew.eval"""
