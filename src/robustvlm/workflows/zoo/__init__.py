"""The model zoo: small VLMs and dual encoders pretrained offline on real images
(`models.zoo_recipes` holds the recipes; `build` builds them)."""
