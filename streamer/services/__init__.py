"""streamer.services"""
