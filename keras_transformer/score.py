"""`python -m keras_transformer.score`: the score command (`keras_transformer.commands.score`; also `kt-score`)."""

if __name__ == "__main__":
    from keras_transformer.commands import launch

    launch("score")
