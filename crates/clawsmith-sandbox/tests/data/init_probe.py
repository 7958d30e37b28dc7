# Run inside the sandbox: tries to reach the memory, descriptors and tracing of pid 1 (the
# command's init, which may run in clawsmith's own address space). Prints one line per attempt:
# the errno's name when refused, REACHED when the kernel let the attempt through (for the memory
# calls EFAULT counts as reached: the permission check comes before the address).
import ctypes, errno, os

libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long


class Iovec(ctypes.Structure):
    _fields_ = [("base", ctypes.c_void_p), ("len", ctypes.c_size_t)]


def report(name, rc):
    if rc >= 0:
        print(name, "REACHED")
        return
    code = ctypes.get_errno()
    print(name, "REACHED" if code == errno.EFAULT else errno.errorcode.get(code, code))


buffer = ctypes.create_string_buffer(64)
local = Iovec(ctypes.cast(buffer, ctypes.c_void_p), 64)
# Any address: a permitted call would answer EFAULT or copy; a refused one EPERM or ESRCH.
remote = Iovec(ctypes.c_void_p(ctypes.addressof(buffer)), 64)
# x86_64 numbers: process_vm_readv 310, process_vm_writev 311, pidfd_open 434,
# pidfd_getfd 438, ptrace 101, kcmp 312.
report("process_vm_readv", libc.syscall(310, 1, ctypes.byref(local), 1, ctypes.byref(remote), 1, 0))
report("process_vm_writev", libc.syscall(311, 1, ctypes.byref(local), 1, ctypes.byref(remote), 1, 0))
pidfd = libc.syscall(434, 1, 0)
if pidfd < 0:
    report("pidfd_open", pidfd)
else:
    for target in range(0, 8):
        rc = libc.syscall(438, pidfd, target, 0)
        if rc >= 0 or ctypes.get_errno() != errno.EBADF:
            report("pidfd_getfd", rc)
            break
    else:
        print("pidfd_getfd REACHED (EBADF for every descriptor)")
report("ptrace_attach", libc.syscall(101, 16, 1, 0, 0))
report("ptrace_seize", libc.syscall(101, 0x4206, 1, 0, 0))
report("kcmp", libc.syscall(312, os.getpid(), 1, 0, 0, 0))
# The numbers of its descriptors may be listed; what they are, never (the links' ptrace check).
try:
    numbers = os.listdir("/proc/1/fd")
except OSError as error:
    numbers = []
    print("proc_fd", errno.errorcode.get(error.errno, error.errno))
refused = set()
for number in numbers:
    for attempt in (os.readlink, lambda path: os.close(os.open(path, os.O_RDONLY))):
        try:
            attempt("/proc/1/fd/" + number)
            print("proc_fd", number, "REACHED")
        except OSError as error:
            refused.add(errno.errorcode.get(error.errno, error.errno))
if numbers:
    print("proc_fd", " ".join(sorted(refused)))
