"""FineTune Studio UI: gradio only, a thin shell over backend/. One module per tab."""
