# Detects CUDA: with PSFLOW_CUDA=AUTO the backend is compiled when /usr/local/cuda/bin/nvcc (or
# CUDACXX) exists; ON makes a missing toolkit an error; OFF skips it. Sets PSFLOW_HAVE_CUDA.
#
# GPU code: sm_80 (A100) and sm_90 (H100/H200) machine code plus compute_90 PTX, which the driver
# compiles for newer GPUs (PSFLOW_DEFAULT_CUDA_ARCHITECTURES), unless the user chose
# CMAKE_CUDA_ARCHITECTURES (-D on the command line, $CUDAARCHS, or an edit of the cached value);
# `cmake -U CMAKE_CUDA_ARCHITECTURES` returns to psflow's. tests/gpu_code holds the built worker
# to psflow's list, or to the user's.
set(PSFLOW_HAVE_CUDA OFF)
set(PSFLOW_DEFAULT_CUDA_ARCHITECTURES 80-real 90-real 90-virtual)

# Sets CMAKE_CUDA_ARCHITECTURES to psflow's default unless the user chose it (-D, $CUDAARCHS, or
# an edit of the cached value). Runs before enable_language(CUDA), which otherwise caches nvcc's
# own default (sm_75 for CUDA 13); a build folder configured before psflow chose holds that,
# recognisable by the help text enable_language gives it, and moves to psflow's default.
# PSFLOW_CUDA_ARCHITECTURES_USER: whether the list is not psflow's default.
function(psflow_choose_cuda_architectures)
  get_property(help CACHE CMAKE_CUDA_ARCHITECTURES PROPERTY HELPSTRING)
  if((NOT DEFINED CMAKE_CUDA_ARCHITECTURES AND "$ENV{CUDAARCHS}" STREQUAL "")
     OR help STREQUAL "CUDA architectures")
    set(CMAKE_CUDA_ARCHITECTURES "${PSFLOW_DEFAULT_CUDA_ARCHITECTURES}" CACHE STRING
        "GPU code to build; psflow's default, -D to choose others" FORCE)
  endif()
  if("${CMAKE_CUDA_ARCHITECTURES}" STREQUAL "${PSFLOW_DEFAULT_CUDA_ARCHITECTURES}")
    set(PSFLOW_CUDA_ARCHITECTURES_USER OFF PARENT_SCOPE)
  else()
    set(PSFLOW_CUDA_ARCHITECTURES_USER ON PARENT_SCOPE)
  endif()
endfunction()

if(NOT PSFLOW_CUDA STREQUAL "OFF")
  if(NOT DEFINED CMAKE_CUDA_COMPILER AND NOT DEFINED ENV{CUDACXX}
     AND EXISTS /usr/local/cuda/bin/nvcc)
    set(CMAKE_CUDA_COMPILER /usr/local/cuda/bin/nvcc)
  endif()
  include(CheckLanguage)
  check_language(CUDA)
  if(CMAKE_CUDA_COMPILER)
    psflow_choose_cuda_architectures()
    enable_language(CUDA)
    find_package(CUDAToolkit REQUIRED)
    set(CMAKE_CUDA_STANDARD 17)  # CMake 3.25 knows no CUDA20 flags for nvcc
    set(CMAKE_CUDA_STANDARD_REQUIRED ON)
    set(PSFLOW_HAVE_CUDA ON)
  elseif(PSFLOW_CUDA STREQUAL "ON")
    message(FATAL_ERROR "PSFLOW_CUDA=ON but no CUDA compiler was found (set CUDACXX)")
  endif()
endif()
message(STATUS "psflow: CUDA backend ${PSFLOW_HAVE_CUDA}")
if(PSFLOW_HAVE_CUDA)
  message(STATUS "psflow: CUDA architectures ${CMAKE_CUDA_ARCHITECTURES}")
endif()
