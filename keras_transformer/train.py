"""`python -m keras_transformer.train`: the train command (`keras_transformer.commands.train`; also `kt-train`)."""

if __name__ == "__main__":
    from keras_transformer.commands import launch

    launch("train")
