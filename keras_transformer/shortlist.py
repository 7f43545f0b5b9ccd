"""`python -m keras_transformer.shortlist`: the shortlist command (`keras_transformer.commands.shortlist`; also `kt-shortlist`)."""

if __name__ == "__main__":
    from keras_transformer.commands import launch

    launch("shortlist")
