"""Gradio-free builders of the dashboard's HTML, tables and figures (runs, inspect, charts, token heatmap)."""
