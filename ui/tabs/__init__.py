"""One module per tab, in the order the shell shows them."""
