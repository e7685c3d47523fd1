"""peak"""
