"""`python -m keras_transformer.export`: the export command (`keras_transformer.commands.export`; also `kt-export`)."""

if __name__ == "__main__":
    from keras_transformer.commands import launch

    launch("export")
