"""clew.envs.rooms"""
