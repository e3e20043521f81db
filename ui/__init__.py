"""FineTune Studio UI: gradio only, a thin shell over backend/.

shell.py places the tabs (tabs/, one module per tab), which place their panels (panels/: a tab's
parts, each building its components) and show what views/ compute (pure functions from data to a
figure, HTML or Markdown); their English and Chinese texts are in texts/. The loose modules are
what they all stand on: the context, the form, the session state and the language switch."""
