"""clew.envs.textminigrid"""
