from yyb.cli import main

main()
