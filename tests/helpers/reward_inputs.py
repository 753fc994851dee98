"""The reward-model tests' question about a picture and its candidate replies."""

QUERY = "What colour is the square?"
RESPONSES = ["It is red.", "It is a blue square on a white page.", "Green."]
