"""clew.training"""
