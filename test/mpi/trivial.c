/* trivial: MPI_Init, one barrier, MPI_Finalize. */
#include "mpitest.h"

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    mt_setup("trivial");
    mt_ok("trivial");
    MPI_Finalize();
    return 0;
}
