"""`python -m keras_transformer.parse`: the parse command (`keras_transformer.commands.parse`; also `kt-parse`)."""

if __name__ == "__main__":
    from keras_transformer.commands import launch

    launch("parse")
