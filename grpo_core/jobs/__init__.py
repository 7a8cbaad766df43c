"""The web half of each child job (preflight, try the model, merge, reward check), named after its worker half."""
