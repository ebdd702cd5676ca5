"""streamer.pipeline"""
