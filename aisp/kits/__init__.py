"""kits"""
