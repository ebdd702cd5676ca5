"""Pictures of tables (matplotlib, the ``charts`` extra): see :mod:`streamer.viz.layout`."""
