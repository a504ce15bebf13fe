# Detects CUDA: with PSFLOW_CUDA=AUTO the backend is compiled when /usr/local/cuda/bin/nvcc (or
# CUDACXX) exists; ON makes a missing toolkit an error; OFF skips it. Sets PSFLOW_HAVE_CUDA.
set(PSFLOW_HAVE_CUDA OFF)
if(NOT PSFLOW_CUDA STREQUAL "OFF")
  if(NOT DEFINED CMAKE_CUDA_COMPILER AND NOT DEFINED ENV{CUDACXX}
     AND EXISTS /usr/local/cuda/bin/nvcc)
    set(CMAKE_CUDA_COMPILER /usr/local/cuda/bin/nvcc)
  endif()
  include(CheckLanguage)
  check_language(CUDA)
  if(CMAKE_CUDA_COMPILER)
    enable_language(CUDA)
    find_package(CUDAToolkit REQUIRED)
    set(CMAKE_CUDA_STANDARD 17)  # CMake 3.25 knows no CUDA20 flags for nvcc
    set(CMAKE_CUDA_STANDARD_REQUIRED ON)
    if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES OR CMAKE_CUDA_ARCHITECTURES STREQUAL "52")
      # sm_80 (A100), sm_90 (H100/H200) as real code, plus PTX for newer GPUs.
      set(CMAKE_CUDA_ARCHITECTURES 80-real 90-real 90-virtual)
    endif()
    set(PSFLOW_HAVE_CUDA ON)
  elseif(PSFLOW_CUDA STREQUAL "ON")
    message(FATAL_ERROR "PSFLOW_CUDA=ON but no CUDA compiler was found (set CUDACXX)")
  endif()
endif()
message(STATUS "psflow: CUDA backend ${PSFLOW_HAVE_CUDA}")
