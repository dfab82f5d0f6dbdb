from autograder.cli import main

if __name__ == "__main__":  # multiprocessing re-imports the main module
    raise SystemExit(main())
