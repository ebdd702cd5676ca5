"""streamer.index"""
