## platforms: calibrated SimGrid platforms (docs/calibration.md)
dist_platforms_DATA += platforms/dgx.xml platforms/a100.xml platforms/small.xml
