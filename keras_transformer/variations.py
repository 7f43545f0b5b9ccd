"""`python -m keras_transformer.variations`: the variations command (`keras_transformer.commands.variations`; also `kt-variations`)."""

if __name__ == "__main__":
    from keras_transformer.commands import launch

    launch("variations")
