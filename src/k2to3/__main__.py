from k2to3.interfaces.entry import main

main()
