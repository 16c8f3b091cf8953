from needle_action.cli import main

main()
