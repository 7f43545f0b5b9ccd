"""`python -m keras_transformer.translate`: the translate command (`keras_transformer.commands.translate`; also `kt-translate`)."""

if __name__ == "__main__":
    from keras_transformer.commands import launch

    launch("translate")
