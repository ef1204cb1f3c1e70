from k2to3.cli import main

main()
