"""Serving: SavedModels in TF Serving's layout, one module per task family."""
