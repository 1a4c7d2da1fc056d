// The tickd executable: the command line of libtickd.so (app/main.cc).
#include "tickd/command_line.h"

int main(int argc, char** argv) { return tickd::run_command_line(argc, argv); }
