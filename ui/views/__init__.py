"""What the app shows, as plain values and Plotly figures; never imports gradio, so every view is tested without a server."""
