"""streamer.read"""
