"""`python -m keras_transformer.summary`: the summary command (`keras_transformer.commands.summary`; also `kt-summary`)."""

if __name__ == "__main__":
    from keras_transformer.commands import launch

    launch("summary")
