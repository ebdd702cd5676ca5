"""streamer.testing"""
