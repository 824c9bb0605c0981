"""clew.envs.oracle_search"""
