"""What the UI shows, as pure functions from data to a figure, HTML or Markdown: charts, tables,
summaries. A view builds no gradio component and holds no state, so its tests call it directly;
panels and tabs put its output into their components."""
