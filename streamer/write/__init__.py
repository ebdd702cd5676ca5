"""streamer.write"""
