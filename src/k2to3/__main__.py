from k2to3.interfaces.cli import main

main()
