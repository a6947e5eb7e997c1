// The sluice binary: everything lives in sluice_app (docs/architecture.md: main is thin).
#include "app/app.hpp"

int main(int argc, char** argv) { return sluice::app::runMain(argc, argv); }
