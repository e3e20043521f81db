"""FineTune Studio backend: everything that is not the UI. Never imports gradio."""
