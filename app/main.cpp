// Temporary entry point; the CLI lands with the trainer.
#include <cstdio>
int main() { std::puts("ustrain " USTRAIN_VERSION); return 0; }
