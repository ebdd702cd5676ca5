"""streamer.engine"""
