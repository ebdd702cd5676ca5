"""streamer.table"""
