// The plugin's status reports (status_report.cc): the Subito_* status
// variables and SHOW ENGINE SUBITO STATUS, for the plugin's declaration and
// handlerton in subito_plugin.cc.
#pragma once

#include <my_global.h>
// clang-format off: the server's headers depend on this order
#include <mysql/plugin.h>
#include "handler.h"
// clang-format on

namespace subito::mariadb {

extern SHOW_VAR status_variables[];
bool ShowEngineStatus(handlerton* hton, THD* thd, stat_print_fn* print, enum ha_stat_type type);

}  // namespace subito::mariadb
