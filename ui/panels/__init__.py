"""A tab's parts: each panel builds its components inside a tab (or, run_notice, beside the tabs) and
wires them to module-level handlers over plain values, tested without a browser. Panels stand on the
views, forms and the context; tabs place them; a panel never imports a tab."""
